"""`bodega clean` refuses, in one line, while the cluster of a data dir runs, and says what a
data dir naming no cluster is.

Running means: its `bodega up`, its `bodega join` or one of its workers holds its lock
file, or a component `cluster.json` lists still runs (named by its command line, so a
pid reused by a stranger does not count). Real lock holders and processes; nothing
here touches the kernel objects of any cluster.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bodega.cluster import cleanup
from bodega.cluster.joined import JoinedHost, JoinedWorker
from bodega.runtime import cluster_id
from bodega.runtime.lifecycle import write_json_atomic
from bodega.runtime.pid_lock import Held, PidLock, holder
from tests.poll_kit import until_sync

HOLD = "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); " \
       "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, str(os.getpid()).encode()); " \
       "print('held', flush=True); time.sleep(60)"


def clean(data: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bodega", "clean", "--data-dir", str(data),
                           *extra], capture_output=True, text=True, timeout=60, check=False)


def holding(path: Path) -> subprocess.Popen[str]:
    """Another process holding ``path``'s lock, as `bodega up` or a worker does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], text=True,
                               stdout=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stdout.readline() == "held\n"
    return process


def test_a_lock_names_its_holder_and_is_free_once_released(tmp_path: Path) -> None:
    lock = PidLock.take(tmp_path / "up.lock", "bodega up is already running")
    with pytest.raises(Held, match=r"^bodega up is already running \(pid \d+\)$"):
        PidLock.take(tmp_path / "up.lock", "bodega up is already running")
    assert holder(tmp_path / "up.lock") is not None
    lock.release()
    assert holder(tmp_path / "up.lock") is None
    assert holder(tmp_path / "absent.lock") is None


@pytest.mark.parametrize("lock", ["up.lock", "join.lock", "workers/ams-1/worker.lock",
                                  "worker.lock"])
def test_clean_refuses_while_a_lock_of_the_data_dir_is_held(tmp_path: Path, lock: str) -> None:
    cid = cluster_id.ensure(tmp_path)
    process = holding(tmp_path / lock)
    try:
        refused = clean(tmp_path)
        assert refused.returncode == 1
        assert len(refused.stderr.splitlines()) == 1, refused.stderr
        assert refused.stderr.startswith(f"Error: the cluster in {tmp_path} is running: ")
        assert f"(pid {process.pid})" in refused.stderr
        assert refused.stdout == ""
    finally:
        process.kill()
        process.communicate()  # reaps it and closes its pipe
    # (Port claims a killed cluster elsewhere left may be listed before it.)
    assert clean(tmp_path, "--dry-run").stdout.splitlines()[-1] == \
        f"nothing to clean for cluster {cid}"


def test_clean_refuses_while_a_listed_component_runs_and_not_for_a_reused_pid(
        tmp_path: Path) -> None:
    cluster_id.ensure(tmp_path)
    # A component of this data dir (its command line names it), and a stranger.
    component = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                  str(tmp_path / "workers" / "ams-1")])
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # One the fork server forked shows its command line as one string (setproctitle).
    title = f"python -m bodega worker --data-dir {tmp_path / 'workers' / 'ams-2'}"
    forked = subprocess.Popen([sys.executable, "-c", "import setproctitle, sys, time; "
                               "setproctitle.setproctitle(sys.argv[1]); time.sleep(60)", title])
    try:
        write_json_atomic(tmp_path / "cluster.json", {"components": [
            {"name": "ams-1", "pid": component.pid}, {"name": "broker", "pid": stranger.pid},
            {"name": "ams-2", "pid": forked.pid}]})
        assert until_sync(lambda: cleanup.component_pids(tmp_path) == [component.pid, forked.pid]
                          or None, "the forked component's title")
        forked.kill()
        forked.wait()
        assert cleanup.component_pids(tmp_path) == [component.pid]
        refused = clean(tmp_path)
        assert refused.returncode == 1
        assert refused.stderr == (f"Error: the cluster in {tmp_path} is running: its "
                                  f"components are still running (pids {component.pid}); "
                                  "stop it first (it cleans up after itself when it stops)\n")
        component.kill()
        component.wait()
        assert cleanup.running(tmp_path) is None
    finally:
        for process in (component, stranger, forked):
            process.kill()
            process.wait()


def test_clean_of_a_data_dir_bodega_wrote_nothing_in_points_to_legacy(tmp_path: Path) -> None:
    refused = clean(tmp_path)
    assert refused.returncode == 1
    assert refused.stderr == (f"Error: {tmp_path} holds nothing bodega wrote (no cluster-id, "
                              "no joined.json); for what versions before cluster ids left, use "
                              "--legacy\n")
    assert refused.stdout == ""


def test_clean_of_a_joined_host_reads_its_cluster_id_and_of_a_worker_names_its_cluster(
        tmp_path: Path) -> None:
    JoinedHost(cluster_id="kq3x9", ca_sha256="00", region="syd", advertise="10.0.0.2",
               join="10.0.0.1:4281", api_url="https://10.0.0.1:4280", seeds=[],
               workers=[JoinedWorker(name="syd-1", subnet="10.251.7.0/24")]).write(tmp_path)
    listed = clean(tmp_path, "--dry-run")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[-1] == "nothing to clean for cluster kq3x9"
    (tmp_path / "workers" / "syd-1").mkdir(parents=True)
    refused = clean(tmp_path / "workers" / "syd-1")
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        f"Error: {tmp_path}/workers/syd-1 is worker syd-1's data dir in the cluster of "
        f"{tmp_path}, which keeps its id: bodega clean --data-dir {tmp_path}"]
