"""HAProxy's files (maps, certificates and their keys) do not outlive a proxy killed with
SIGKILL: the next start of the same data dir removes the directory the killed one left,
and so does ``bodega clean`` of a cluster that is not started again."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from bodega.cluster import cleanup
from bodega.proxy.plane import WORKDIR_NOTE, WORKDIR_PREFIX, give_back_workdir, take_workdir
from bodega.runtime import cluster_id


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


async def test_bodega_clean_removes_what_a_killed_proxy_left_and_nothing_else(
        tmp_path: Path) -> None:
    """The cluster is not started again: ``bodega clean`` (``cleanup.sweep``) removes the
    directory its killed proxy noted, and lists it first when dry."""
    cluster = tmp_path / "cluster"
    killed = made()
    take_workdir(cluster / "proxy", killed)  # then SIGKILL
    precious = Path(tempfile.mkdtemp(prefix="precious-"))
    (cluster / "workers" / "w1").mkdir(parents=True)
    (cluster / "workers" / "w1" / WORKDIR_NOTE).write_text(f"{precious}\n")  # not a proxy's
    cid = cluster_id.new()
    try:
        listed = await cleanup.sweep(cluster, cid, dry_run=True)
        assert listed.proxy_dirs == (killed,)
        assert f"would remove a killed proxy's HAProxy files (TLS keys among them) in " \
               f"{killed}" in listed.lines(dry_run=True)
        assert killed.exists()
        removed = await cleanup.sweep(cluster, cid)
        assert removed.proxy_dirs == (killed,)
        assert removed.problems == ()
        assert not killed.exists()
        assert precious.exists()
        assert (await cleanup.sweep(cluster, cid, dry_run=True)).found == 0
    finally:
        shutil.rmtree(killed, ignore_errors=True)
        shutil.rmtree(precious, ignore_errors=True)
