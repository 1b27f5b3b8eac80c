"""An exec in an image machine runs where its program runs (the runtime's ``exec``): in the
container's namespaces and cgroups, as the image's user, with the program's capabilities,
limits and environment."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ..daemon_kit import running_worker_daemon
from .image_kit import build_image, needs_image_tools, registry
from .test_image_machines import fetch, image_machine, worker_args

pytestmark = needs_image_tools

NAMESPACES = ("mnt", "net", "uts", "ipc", "pid", "cgroup", "user")
CREDENTIALS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
               "NoNewPrivs", "Seccomp")
# Busybox tools only: what the exec's own shell is in and was given, section by section.
VIEW = (
    f"for n in {' '.join(NAMESPACES)}; do readlink /proc/$$/ns/$n; done\n"
    "echo @@; cat /proc/$$/cgroup\n"
    "echo @@; grep -E '^(Uid|Gid|Groups|Cap...|NoNewPrivs|Seccomp):' /proc/$$/status\n"
    "echo @@; cat /proc/$$/environ\n"
)


def program_pid(machine_id: str) -> int:
    """The container's program (its httpd), found by its command and its cgroup. httpd
    forks a child per connection, which may not have exited yet: the program is the one
    httpd whose parent is not an httpd of the machine."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit()
                    and (entry / "cmdline").read_bytes().startswith(b"/bin/httpd\0")
                    and f"/{machine_id}\n" in (entry / "cgroup").read_text()):
                found[int(entry.name)] = parent_of(entry)
        except OSError:
            continue
    programs = [pid for pid, parent in found.items() if parent not in found]
    assert len(programs) == 1, found
    return programs[0]


def parent_of(entry: Path) -> int:
    status = (entry / "status").read_text().splitlines()
    return int(next(line for line in status if line.startswith("PPid:")).split()[1])


def view_of(pid: int) -> list[str | list[str] | dict[str, str]]:
    proc = Path(f"/proc/{pid}")
    status = (proc / "status").read_text().splitlines()
    return [
        [os.readlink(proc / "ns" / n) for n in NAMESPACES],
        (proc / "cgroup").read_text(),
        [line for line in status if line.split(":")[0] in CREDENTIALS],
        environment((proc / "environ").read_text()),
    ]


def environment(raw: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


@pytest.mark.parametrize("runtime", ["runc", "crun"])
async def test_an_exec_is_in_the_containers_namespaces_and_cgroups_as_its_program_is(
        tmp_path: Path, runtime: str) -> None:
    if shutil.which(runtime) is None:
        pytest.skip(f"{runtime} is not installed on this host")
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/user:v1", user="65534:65534")
        args = worker_args(host, "--oci-runtime", runtime)
        async with running_worker_daemon(tmp_path, **args) as (_daemon, client):
            machine = await image_machine(client, image)
            await fetch(f"http://{machine.private_ip}:8080/")  # its program is up
            program = view_of(program_pid(machine.id))
            done = await client.call("POST", machine.id, "exec",
                                     json={"command": ["/bin/sh", "-c", VIEW]})
            assert done["exit_code"] == 0, done
            ns, cgroup, ids, env = done["stdout"].split("@@\n")
            assert ns.splitlines() == program[0]
            assert cgroup == program[1]
            assert ids.splitlines() == program[2]
            assert environment(env) == program[3]
            assert ids.splitlines()[0].split()[1:] == ["65534"] * 4
            assert environment(env)["FROM_CONFIG"] == "1"
            await client.destroy(machine.id, force=True)
            await client.wait(machine.id, "destroyed", timeout=30)
