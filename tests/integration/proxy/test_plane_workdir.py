"""HAProxy's files (maps, certificates and their keys) do not outlive a proxy killed with
SIGKILL: the next start of the same data dir removes the directory the killed one left."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from bodega.proxy.plane import WORKDIR_NOTE, WORKDIR_PREFIX, give_back_workdir, take_workdir


def made() -> Path:
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    (workdir / "default.pem").write_text("a key")
    return workdir


def test_a_start_removes_what_a_killed_run_of_its_data_dir_left(tmp_path: Path) -> None:
    killed = made()
    take_workdir(tmp_path, killed)  # then SIGKILL: nothing more runs
    restarted = made()
    try:
        take_workdir(tmp_path, restarted)
        assert not killed.exists()
        assert restarted.exists()
        assert (tmp_path / WORKDIR_NOTE).read_text() == f"{restarted}\n"
    finally:
        give_back_workdir(tmp_path, restarted)
    assert not restarted.exists()
    assert not (tmp_path / WORKDIR_NOTE).exists()


@pytest.mark.parametrize("where", ["named like one, elsewhere", "in the temporary directory, "
                                   "named otherwise"])
def test_only_a_proxy_workdir_in_the_temporary_directory_is_removed(tmp_path: Path,
                                                                     where: str) -> None:
    """A note edited to name anything else (another directory of the host) removes nothing."""
    if where.startswith("named like"):
        precious = tmp_path / f"{WORKDIR_PREFIX}precious"
        precious.mkdir()
    else:
        precious = Path(tempfile.mkdtemp(prefix="precious-"))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / WORKDIR_NOTE).write_text(f"{precious}\n")
    mine = made()
    try:
        take_workdir(tmp_path / "data", mine)
        assert precious.exists()
    finally:
        give_back_workdir(tmp_path / "data", mine)
        shutil.rmtree(precious, ignore_errors=True)
