"""How a process machine's start is put together (pure, or over plain files): the
wrapper's command line, the program's step that alone carries the machine's variables,
a parked launcher's run script, and the order of the binds."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from bodega.worker.drivers.base import DriverError, Mount, TaskSpec
from bodega.worker.drivers.process.launch import (
    STEP_HEAD,
    STEP_TAIL,
    WRAPPER,
    RunFiles,
    bind_order,
    program_step,
    wrapper_argv,
)
from bodega.worker.drivers.process.parking import run_script

FILES = RunFiles.for_run(Path("/data/machines/m/"), "01I", 3)
PROCS = [Path("/sys/fs/cgroup/memory/bodega/w/m/cgroup.procs")]
TRICKY = "$(id) `id` 'q' \"d\" \\ ;\nBODEGA_STEP\nline three"
ENV = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": "/data/evil.so", "TRICKY": TRICKY,
       "odd.name": "x"}


def test_the_wrapper_gets_paths_and_ids_and_none_of_the_machines_variables() -> None:
    argv = wrapper_argv(["python3", "app.py", "$HOME"], FILES, cgroup_procs=PROCS,
                        user=(1073741826, 1073741826), memory_kib=None,
                        mounts=[(Path("/data/volumes/v"), "/srv")], netns="ns1",
                        home=Path("/data/machines/m/root"))
    assert argv == [
        "nsenter", "--net=/run/netns/ns1", "--",
        "unshare", "--mount", "--propagation", "private", "--",
        "/bin/sh", "-c", WRAPPER, "bodega-machine",
        str(PROCS[0]), "/data/machines/m/run/01I-3.pid", "/data/machines/m/run/01I-3.exit",
        "1073741826:1073741826", "-", "/data/volumes/v=/srv", "/data/machines/m/root",
        "/data/machines/m/run/01I-3.gate",  # mounts: bound once the program's step says go
        "0",  # the program's step comes on stdin
        "python3", "app.py", "$HOME",  # the client's argv, whole, as "$@"
    ]


def test_without_mounts_there_is_no_gate_and_without_a_step_no_mounts() -> None:
    plain = wrapper_argv(["runc", "run"], FILES, cgroup_procs=[], user=None, memory_kib=262144,
                         mounts=[], netns=None, environment=False)
    assert plain == ["/bin/sh", "-c", WRAPPER, "bodega-machine", "-",
                     str(FILES.pidfile), str(FILES.exitfile), "-", "262144", "-", "-", "-",
                     "-", "runc", "run"]
    with pytest.raises(ValueError, match="gate"):
        wrapper_argv(["x"], FILES, cgroup_procs=[], user=None, memory_kib=None,
                     mounts=[(Path("/v"), "/srv")], netns=None, environment=False)
    with pytest.raises(ValueError, match="spaces"):
        wrapper_argv(["x"], FILES, cgroup_procs=[], user=None, memory_kib=None,
                     mounts=[(Path("/v"), "/my data")], netns=None)


def test_root_steps_run_host_commands_by_name_only_before_any_machine_bind() -> None:
    """Everything the wrapper runs as root (mount, mkdir, unshare) it runs before the binds
    of what the machine owns, which BIND makes only past the gate; its last word is a
    builtin's."""
    binds = WRAPPER.index('mount --bind "${m%%=*}"')
    assert WRAPPER.index("read -r go <&4") < binds
    assert WRAPPER.index("unshare ") < binds
    assert "$pidf" not in WRAPPER[binds:]
    assert "$exitf" not in WRAPPER[binds:]
    assert WRAPPER.rstrip().endswith("echo $? >&5")


def test_the_program_step_alone_holds_the_variables_as_quoted_literals() -> None:
    step = program_step(ENV)
    assert step.startswith(STEP_HEAD)
    assert step.endswith(STEP_TAIL)
    exports = step[len(STEP_HEAD):-len(STEP_TAIL)]
    assert shlex.split(exports) == ["export", "PATH=/usr/bin:/bin",
                                    "export", "LD_PRELOAD=/data/evil.so",
                                    "export", f"TRICKY={TRICKY}"]  # odd.name: no shell name
    assert STEP_TAIL == 'exec "$@" </dev/null\n'
    assert "unset PATH OLDPWD" in STEP_HEAD  # the wrapper's own: not the program's
    assert program_step({}) == STEP_HEAD + STEP_TAIL


def spec(tmp: Path, **changes: object) -> TaskSpec:
    base = TaskSpec(machine_id="m", instance_id="01I", start_seq=3, app="a", image="i",
                    argv=["python3", "-c", "print('$HOME')"], env=ENV, cpus=1,
                    cpu_kind="shared", memory_mb=256, machine_dir=tmp / "m", netns="ns1",
                    user=(1073741826, 1073741826))
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_parked_run_hands_the_step_to_the_wrapper_as_a_here_document(
        tmp_path: Path) -> None:
    s = spec(tmp_path)
    script = run_script(s, RunFiles.for_run(s.machine_dir, s.instance_id, 3), None, [], True)
    head, _, rest = script.partition(" <<'")
    end, _, body = rest.partition("'\n")
    assert end == "BODEGA_STEP_"  # a line of the step is BODEGA_STEP: not its end
    assert body == program_step(ENV) + f"{end}\n}}\n"
    assert "evil.so" not in head  # nothing of it outside the step
    opening, log, cd, command = head.split("\n", 3)
    assert (opening, log.startswith("exec >>"), cd.startswith("cd ")) == ("{", True, True)
    words = shlex.split(command)
    assert words[:5] == ["exec", "/bin/sh", "-c", WRAPPER, "bodega-machine"]
    assert words[5:] == ["-", str(s.machine_dir / "run" / "01I-3.pid"),
                         str(s.machine_dir / "run" / "01I-3.exit"), "1073741826:1073741826",
                         "-", "-", "@", "-", "0", "python3", "-c", "print('$HOME')"]


def test_the_files_are_bound_before_the_one_directory(tmp_path: Path) -> None:
    volume, resolv, other = tmp_path / "volume", tmp_path / "resolv.conf", tmp_path / "other"
    volume.mkdir()
    other.mkdir()
    resolv.write_text("nameserver ::1\n")
    assert bind_order([Mount(volume, "/data"), Mount(resolv, "/etc/resolv.conf")]) == [
        (resolv, "/etc/resolv.conf"), (volume, "/data")]
    with pytest.raises(DriverError, match="one directory at most"):
        bind_order([Mount(volume, "/data"), Mount(other, "/srv")])
