"""A start's files: the pure plan (secrets resolved), and their writing into a container's
root, every symlink on the way followed inside it, the last start's that this one does
not write removed."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from bodega.model.machine_config import File
from bodega.worker.core.guest_files import FilesRefused, GuestFile, dropped, guest_files
from bodega.worker.drivers.base import DriverError
from bodega.worker.drivers.oci.guest_files import (
    in_root,
    refresh_files,
    swap_written,
    write_files,
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_the_plan_decodes_raw_values_and_secrets_with_the_default_mode() -> None:
    files = [File(guest_path="/a", raw_value=b64(b"raw\x00")),
             File(guest_path="/b", secret_name="CERT", mode=0o600)]
    planned = guest_files(files, {"CERT": b64(b"-----BEGIN-----\n")})
    assert planned == (GuestFile("/a", b"raw\x00", 0o644),
                       GuestFile("/b", b"-----BEGIN-----\n", 0o600))
    assert "BEGIN" not in repr(planned)  # a secret's bytes never reach a log line


def test_a_missing_or_unreadable_secret_refuses_the_start_by_name_only() -> None:
    file = File(guest_path="/b", secret_name="CERT")
    with pytest.raises(FilesRefused, match="file /b: the app has no secret CERT"):
        guest_files([file], {"OTHER": "x"})
    with pytest.raises(FilesRefused, match="file /b: secret CERT is not base64") as caught:
        guest_files([file], {"CERT": "plain text!"})
    assert "plain text" not in str(caught.value)


def test_files_are_written_with_their_mode_and_directories_made(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "old").write_text("was here")
    write_files(root, [GuestFile("/app/conf/x.conf", b"one\n", 0o640),
                       GuestFile("/etc/old", b"new", 0o600)])
    assert (root / "app" / "conf" / "x.conf").read_bytes() == b"one\n"
    assert stat.S_IMODE((root / "app" / "conf" / "x.conf").stat().st_mode) == 0o640
    assert stat.S_IMODE((root / "app" / "conf").stat().st_mode) == 0o755
    assert (root / "etc" / "old").read_bytes() == b"new"  # written over, every start
    assert stat.S_IMODE((root / "etc" / "old").stat().st_mode) == 0o600


def test_symlinks_are_followed_inside_the_root_never_out_of_it(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    outside = tmp_path / "host"
    outside.mkdir()
    (root / "usr" / "etc").mkdir(parents=True)
    (root / "var").mkdir()
    os.symlink("/usr/etc", root / "etc")  # absolute: from the root, not the host's /
    os.symlink(str(outside), root / "var" / "run")  # a link to a host path, as a program may
    os.symlink("../../../../../../host/planted", root / "usr" / "up")
    write_files(root, [GuestFile("/etc/app.conf", b"a"), GuestFile("/var/run/x", b"b"),
                       GuestFile("/usr/up", b"c")])
    assert (root / "usr" / "etc" / "app.conf").read_bytes() == b"a"
    assert (root / str(outside).lstrip("/") / "x").read_bytes() == b"b"
    assert (root / "host" / "planted").read_bytes() == b"c"
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "host" / "planted").exists()


def test_a_path_with_no_place_in_the_root_is_a_driver_error(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    root.mkdir()
    os.symlink("loop", root / "loop")
    with pytest.raises(DriverError, match="too many symbolic links"):
        in_root(root, "/loop/x")
    os.symlink("/", root / "top")
    with pytest.raises(DriverError, match="resolves to the root itself"):
        in_root(root, "/top")
    (root / "file").write_text("")
    with pytest.raises(DriverError, match="file /file/x: cannot write it"):
        write_files(root, [GuestFile("/file/x", b"")])


def test_a_file_the_last_start_wrote_and_this_one_does_not_is_removed(tmp_path: Path) -> None:
    root, written = tmp_path / "rootfs", tmp_path / "files.json"
    root.mkdir()
    refresh_files(root, written, [GuestFile("/a", b"a"), GuestFile("/d/b", b"b"),
                                  GuestFile("/c", b"c")])
    (root / "mine").write_text("the program's own")
    (root / "c").unlink()
    (root / "c").mkdir()  # the program made a directory where a file was: left
    refresh_files(root, written, [GuestFile("/a", b"a2")])
    assert sorted(p.name for p in root.iterdir()) == ["a", "c", "d", "mine"]
    assert (root / "a").read_bytes() == b"a2"
    assert list((root / "d").iterdir()) == []
    assert dropped(["/a", "/d/b", "/d/b"], [GuestFile("/a", b"")]) == ("/d/b",)
    refresh_files(root, written, [])
    assert not (root / "a").exists()
    assert swap_written(written, []) == ()  # nothing recorded any more
