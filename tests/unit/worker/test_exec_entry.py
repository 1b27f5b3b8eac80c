"""How an exec enters a machine: a process machine's command line and environment (pure),
and the cgroups it joins (read from a cgroup tree made of plain files); an image machine's
runtime process (pure)."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

from bodega.worker.drivers.oci.control import exec_process
from bodega.worker.drivers.oci.core.bundle import MachineCommand, runtime_spec
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.entry import (
    ENTER,
    LOAD,
    Entry,
    HeldFiles,
    entry_argv,
)
from bodega.worker.drivers.process.launch import environment_script
from bodega.worker.images.core.manifest import ImageConfig

HELD = "/proc/100/fd"  # the worker's open files
FILES = HeldFiles(namespaces=(("--net", f"{HELD}/7"), ("--mount", f"{HELD}/8")),
                  root=f"{HELD}/9", cwd=f"{HELD}/10", environment=f"{HELD}/11")
CGROUPS = (Path("/sys/fs/cgroup/memory/bodega/w/m/cgroup.procs"),
           Path("/sys/fs/cgroup/cpu/bodega/w/m/cgroup.procs"))
USER = (1073741826, 1073741826)


def test_an_exec_joins_the_cgroups_enters_and_becomes_the_user_before_it_runs_anything() -> None:
    argv = entry_argv(Entry(FILES, CGROUPS, USER), ["sh", "-c", "echo $HOME; rm -rf /"])
    assert argv == [
        "/bin/sh", "-c", ENTER, "bodega-exec",
        "/sys/fs/cgroup/memory/bodega/w/m/cgroup.procs "
        "/sys/fs/cgroup/cpu/bodega/w/m/cgroup.procs",
        f"{HELD}/11",
        "nsenter", f"--net={HELD}/7", f"--mount={HELD}/8", f"--root={HELD}/9",
        f"--wd={HELD}/10", "--setuid", "1073741826", "--setgid", "1073741826", "--",
        "/bin/sh", "-c", LOAD, "bodega-exec", "-",
        "sh", "-c", "echo $HOME; rm -rf /",  # the client's argv, whole, as "$@"
    ]


def test_with_nothing_to_enter_and_no_user_to_become_there_is_no_nsenter() -> None:
    nothing = replace(FILES, namespaces=())
    argv = entry_argv(Entry(nothing, (), None, memory_kib=262144), ["id"])
    assert argv == ["/bin/sh", "-c", ENTER, "bodega-exec", "-", f"{HELD}/11",
                    "/bin/sh", "-c", LOAD, "bodega-exec", "262144", "id"]


def test_a_user_to_become_with_no_namespace_to_enter_enters_its_own() -> None:
    """util-linux 2.41 and later refuse an nsenter with no namespace: it enters the UTS
    namespace it is in (nothing changes), then takes the user."""
    nothing = replace(FILES, namespaces=())
    argv = entry_argv(Entry(nothing, (), USER), ["id"])
    assert argv[argv.index("nsenter"):argv.index("--") + 1] == [
        "nsenter", "--uts=/proc/self/ns/uts", f"--root={HELD}/9", f"--wd={HELD}/10",
        "--setuid", str(USER[0]), "--setgid", str(USER[1]), "--"]


def test_a_machine_of_the_workers_own_user_is_entered_without_a_change_of_user() -> None:
    argv = entry_argv(Entry(FILES, CGROUPS, None), ["id"])
    assert "--setuid" not in argv
    assert argv[argv.index("nsenter"):argv.index("--") + 1] == [
        "nsenter", f"--net={HELD}/7", f"--mount={HELD}/8", f"--root={HELD}/9",
        f"--wd={HELD}/10", "--"]


def test_the_environment_is_quoted_literals_of_the_names_a_shell_can_export() -> None:
    env = {"PATH": "/usr/bin:/bin", "TRICKY": "$(id) `id` 'q' \"d\" \\ ;\nline two",
           "odd.name": "x", "with-dash": "y", "_ok9": "", "9lead": "z"}
    statements = _statements(environment_script(env))
    assert [shlex.split(statement) for statement in statements] == [
        ["export", "PATH=/usr/bin:/bin"],
        ["export", "TRICKY=$(id) `id` 'q' \"d\" \\ ;\nline two"],
        ["export", "_ok9="],
    ]
    assert all(statement.startswith("export ") for statement in statements)
    assert environment_script({}) == ""


def _statements(script: str) -> list[str]:
    """The script's statements: a newline inside quotes belongs to its statement."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        try:
            shlex.split(current)
        except ValueError:  # an open quote: the statement goes on
            continue
        statements.append(current)
        current = ""
    assert current == ""
    return statements


def cgroup_tree(root: Path, scope: str, machine_id: str, listed: dict[str, str]) -> None:
    for controller in ("memory", "cpu", "freezer"):
        path = root / controller / "bodega" / scope / machine_id
        path.mkdir(parents=True)
        (path / "cgroup.procs").write_text(listed.get(controller, ""))
    (root / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")


def test_an_exec_joins_the_machines_cgroups_its_wrapper_is_in(tmp_path: Path) -> None:
    cgroups = Cgroups(1, "w", tmp_path)
    cgroup_tree(tmp_path, "w", "m", {"memory": "41\n42\n", "cpu": "42\n", "freezer": "41\n"})
    machine = Path("bodega") / "w" / "m" / "cgroup.procs"
    assert cgroups.holding("m", 42) == [tmp_path / "memory" / machine,
                                        tmp_path / "cpu" / machine]
    # Once a suspend has moved it into the freezer's cgroup, there too.
    (tmp_path / "freezer" / "bodega" / "w" / "m" / "cgroup.procs").write_text("41\n42\n")
    assert cgroups.holding("m", 42)[-1] == tmp_path / "freezer" / machine
    assert cgroups.holding("m", 4) == []  # not a prefix: pid 4 is in none
    assert cgroups.holding("gone", 42) == []


def test_on_v2_the_machines_one_cgroup(tmp_path: Path) -> None:
    cgroups = Cgroups(2, "w", tmp_path)
    path = tmp_path / "bodega" / "w" / "m"
    path.mkdir(parents=True)
    (path / "cgroup.procs").write_text("42\n")
    assert cgroups.holding("m", 42) == [path / "cgroup.procs"]


def test_an_image_machines_exec_is_its_programs_process_running_the_command() -> None:
    image = ImageConfig.model_validate({"config": {"Cmd": ["/bin/httpd"], "User": "65534",
                                                   "WorkingDir": "/www"}})
    config = runtime_spec(image, MachineCommand([], None, None), env={"SECRET": "s"},
                          rootfs="/r", hostname="m", cgroups_path=None, user=(65534, 65534),
                          binds=[])
    process = json.loads(exec_process(json.dumps(config), ["sh", "-c", "id; $HOME"]))
    program = config["process"]
    assert process == {**program, "args": ["sh", "-c", "id; $HOME"], "terminal": False}
    assert (process["user"], process["cwd"]) == ({"uid": 65534, "gid": 65534}, "/www")
    assert "SECRET=s" in process["env"]
    assert program["args"] == ["/bin/httpd"], "the bundle's own process is left as it was"
