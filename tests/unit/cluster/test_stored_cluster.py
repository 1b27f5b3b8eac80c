"""Which files of a data dir name its cluster, and whose objects that makes the data dir's.

``decide`` is pure (what the files say, given); ``read_files`` reads real files from a
temporary directory: ``cluster-id`` as ``bodega up`` and a lone worker write it,
``joined.json`` as ``bodega join`` writes it.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from bodega.cluster.joined import JoinedHost, JoinedWorker
from bodega.cluster.stored_cluster import (
    DataDirFiles,
    HostWorker,
    NothingStored,
    StoredCluster,
    decide,
    read,
    read_files,
)
from bodega.runtime import cluster_id
from bodega.worker.host.parts import default_subnet

D = Path("/srv/bodega")


def joined(cid: str = "kq3x9", *workers: JoinedWorker) -> JoinedHost:
    return JoinedHost(cluster_id=cid, ca_sha256="00", region="syd", advertise="10.0.0.2",
                      join="10.0.0.1:4281", api_url="https://10.0.0.1:4280", seeds=[],
                      workers=list(workers))


def test_the_cluster_id_file_names_every_object_of_its_id() -> None:
    assert decide(DataDirFiles(D, cluster_id="kq3x9")) == StoredCluster("kq3x9", "cluster-id")


def test_a_joined_host_names_its_own_workers_by_subnet_given_or_their_default() -> None:
    host = joined("m0zz1", JoinedWorker(name="syd-1", subnet="10.209.7.0/24"),
                  JoinedWorker(name="syd-2"))
    assert decide(DataDirFiles(D, joined=host)) == StoredCluster("m0zz1", "joined.json", (
        HostWorker("syd-1", ipaddress.ip_network("10.209.7.0/24")),
        HostWorker("syd-2", ipaddress.ip_network(default_subnet("syd-2")))))


def test_a_cluster_id_of_its_own_wins_over_a_joined_record() -> None:
    found = decide(DataDirFiles(D, cluster_id="kq3x9", joined=joined("m0zz1")))
    assert found == StoredCluster("kq3x9", "cluster-id")


def test_a_joined_record_with_no_cluster_id_in_it_is_refused() -> None:
    with pytest.raises(ValueError, match="is not 5 characters"):
        decide(DataDirFiles(D, joined=joined("NOPE")))


@pytest.mark.parametrize(("files", "said"), [
    (DataDirFiles(D, exists=False), f"{D} does not exist"),
    (DataDirFiles(D / "workers" / "ams-1", within=D),
     f"{D}/workers/ams-1 is worker ams-1's data dir in the cluster of {D}, which keeps its "
     f"id: bodega clean --data-dir {D}"),
    (DataDirFiles(D, worker_state=True),
     f"{D} is a worker's data dir, but its worker was given --cluster-id and keeps no id "
     "there: clean the data dir of the cluster that gave it"),
    (DataDirFiles(D),
     f"{D} holds nothing bodega wrote (no cluster-id, no joined.json); for what versions "
     "before cluster ids left, use --legacy"),
])
def test_a_data_dir_naming_no_cluster_says_what_it_is_in_one_line(
        files: DataDirFiles, said: str) -> None:
    with pytest.raises(NothingStored) as refused:
        decide(files)
    assert str(refused.value) == said


def test_the_files_are_read_where_bodega_writes_them(tmp_path: Path) -> None:
    up, lone, host, empty = (tmp_path / n for n in ("up", "lone", "host", "empty"))
    cid = cluster_id.ensure(up)
    (up / "workers" / "ams-1").mkdir(parents=True)
    assert read(up) == StoredCluster(cid, "cluster-id")
    assert read_files(up / "workers" / "ams-1").within == up
    lone.mkdir()
    (lone / "worker.db").touch()
    assert read_files(lone).worker_state
    host.mkdir()
    joined("m0zz1", JoinedWorker(name="syd-1", subnet="10.209.7.0/24")).write(host)
    assert read(host).workers == (HostWorker("syd-1", ipaddress.ip_network("10.209.7.0/24")),)
    (host / "workers" / "syd-1").mkdir(parents=True)
    assert read_files(host / "workers" / "syd-1").within == host
    empty.mkdir()
    assert read_files(empty) == DataDirFiles(empty)
    assert not read_files(tmp_path / "absent").exists


def test_a_garbled_joined_record_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "joined.json").write_text('{"cluster_id": "kq3x9"}')
    with pytest.raises(ValueError, match=r"joined.json is not what bodega join writes: ") as err:
        read(tmp_path)
    assert "\n" not in str(err.value)
