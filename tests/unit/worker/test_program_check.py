"""Whether a machine's user may exec its program, said before the start: the kernel's rule
read from mode bits (over plain files and directories; none is run)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from bodega.worker.drivers.base import DriverError, TaskSpec
from bodega.worker.drivers.process.program import (
    EXECUTE,
    check_program,
    executable_by,
    permits,
)

USER = (1073741826, 1073741826)


def found(mode: int, uid: int = 0, gid: int = 0) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))


def test_the_first_class_the_user_is_in_decides() -> None:
    uid, gid = USER
    assert permits(found(0o755), USER, EXECUTE)  # others may
    assert not permits(found(0o750), USER, EXECUTE)
    assert permits(found(0o750, gid=gid), USER, EXECUTE)  # its group may
    # Its owner may not, though its group and others may: the owner's bits decide.
    assert not permits(found(0o677, uid=uid, gid=gid), USER, EXECUTE)
    assert not permits(found(0o707, gid=gid), USER, EXECUTE)  # its group's bits decide


def program(tmp_path: Path, *, closed: str | None = None) -> Path:
    tmp_path.chmod(0o755)  # the top of the walk (pytest makes it 0700)
    (tmp_path / "opt" / "bin").mkdir(parents=True)
    path = tmp_path / "opt" / "bin" / "app"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    for directory in (tmp_path / "opt", tmp_path / "opt" / "bin"):
        directory.chmod(0o700 if directory.name == closed else 0o755)
    return path


@pytest.mark.parametrize("closed", [None, "opt", "bin"])
def test_every_directory_on_the_way_must_be_searchable(tmp_path: Path,
                                                        closed: str | None) -> None:
    path = program(tmp_path, closed=closed)
    assert executable_by(path, USER, tmp_path) == (closed is None)


def test_a_file_without_its_x_bit_for_others_is_not(tmp_path: Path) -> None:
    path = program(tmp_path)
    path.chmod(0o744)
    assert not executable_by(path, USER, tmp_path)
    assert not executable_by(tmp_path / "opt" / "bin", USER, tmp_path)  # not a file
    assert not executable_by(tmp_path / "missing", USER, tmp_path)


def test_a_link_is_followed_into_where_it_leads(tmp_path: Path) -> None:
    """An open name for a closed file (a venv's python, linked into a pyenv under /root)."""
    path = program(tmp_path, closed="opt")
    (tmp_path / "open").mkdir(mode=0o755)
    link = tmp_path / "open" / "app"
    link.symlink_to(path)
    assert not executable_by(link, USER, tmp_path)
    (tmp_path / "opt").chmod(0o755)
    assert executable_by(link, USER, tmp_path)


def spec(tmp_path: Path, argv: list[str], **changes: object) -> TaskSpec:
    base = TaskSpec(machine_id="m", instance_id="01I", start_seq=1, app="a", image="i",
                    argv=argv, env={"PATH": "/usr/bin:/bin"}, cpus=1, cpu_kind="shared",
                    memory_mb=256, machine_dir=tmp_path / "m", netns=None, user=USER)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_the_start_names_what_its_user_cannot_run(tmp_path: Path) -> None:
    # pytest's directories above it are closed to other users, as /root is.
    path = program(tmp_path)
    with pytest.raises(DriverError) as refused:
        check_program(spec(tmp_path, [str(path)]))
    assert str(refused.value) == (
        f"exec: {path}: not executable by the machine's user (uid {USER[0]}): the file, "
        "or a directory on its way, is closed to that user")
    with pytest.raises(DriverError, match=r"^exec: app: not executable by the machine's"):
        check_program(spec(tmp_path, ["app"], env={"PATH": str(path.parent)}))
    check_program(spec(tmp_path, [str(path)], user=None))  # the worker's own user may


def test_what_its_user_can_run_passes(tmp_path: Path) -> None:
    check_program(spec(tmp_path, ["/bin/sh", "-c", "true"]))
    check_program(spec(tmp_path, ["sh"]))
    # Relative: from its own directory, bound where the machine starts (open to it).
    home = tmp_path / "m" / "root"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "app").write_text("#!/bin/sh\n")
    (home / "bin" / "app").chmod(0o755)
    check_program(spec(tmp_path, ["bin/app"]))
    (home / "bin").chmod(0o700)
    with pytest.raises(DriverError, match="not executable by the machine's user"):
        check_program(spec(tmp_path, ["bin/app"]))


def test_a_missing_program_is_said_as_before(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match=r"^exec: /nope/app: no such executable file$"):
        check_program(spec(tmp_path, ["/nope/app"]))
    with pytest.raises(DriverError, match=r"^exec: nosuch: not found in PATH /usr/bin:/bin$"):
        check_program(spec(tmp_path, ["nosuch"]))
    with pytest.raises(DriverError, match=r"^no command to run"):
        check_program(spec(tmp_path, []))
