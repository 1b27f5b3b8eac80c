"""The process driver with real processes, cgroups and network namespaces."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import signal
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from bodega.runtime import cluster_id
from bodega.worker.drivers.base import DriverError, Mount, TaskGone, TaskHandle, TaskSpec
from bodega.worker.drivers.process import ProcessDriver
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.launch import HOME_MOUNT, RunFiles
from bodega.worker.drivers.process.logfiles import log_path
from bodega.worker.host.core.names import HostNames
from bodega.worker.host.netns import NetnsNetwork
from bodega.worker.host.network import run
from tests.poll_kit import until
from tests.python_kit import machine_python

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (cgroups, netns, users)")


def spec(tmp: Path, code: str, *, memory_mb: int = 256, seq: int = 1, netns: str | None = None,
         user: tuple[int, int] | None = None, machine_id: str | None = None) -> TaskSpec:
    mid = machine_id or uuid.uuid4().hex[:14]
    return TaskSpec(
        machine_id=mid, instance_id="01TESTINSTANCE000000000000", start_seq=seq, app="app",
        image="img", argv=[machine_python(), "-c", code],
        env={"PATH": "/usr/bin:/bin", "GREETING": "hello"}, cpus=1, cpu_kind="shared",
        memory_mb=memory_mb, machine_dir=tmp / mid, netns=netns, user=user,
    )


@pytest.fixture
async def driver() -> AsyncIterator[ProcessDriver]:
    cgroups = Cgroups.detect(f"test-{uuid.uuid4().hex[:8]}")
    d = ProcessDriver(cgroups)
    yield d
    if cgroups is not None:
        for path in (cgroups.root / "memory" / "bodega" / cgroups.scope,
                     cgroups.root / "cpu" / "bodega" / cgroups.scope):
            if path.exists():
                for child in [c for c in path.iterdir() if c.is_dir()]:
                    cgroups.kill_all(child.name)
                    await until(lambda c=child: not cgroups.pids(c.name))
                    child.rmdir()
                path.rmdir()



async def test_runs_in_its_own_session_with_env_cwd_and_log(tmp_path: Path,
                                                           driver: ProcessDriver) -> None:
    code = ("import os; print(os.environ['GREETING'], os.getcwd(), os.getsid(0) == os.getpid() "
            "or os.getsid(0) == os.getppid(), flush=True)")
    s = spec(tmp_path, code)
    handle = await driver.start(s)
    status = await asyncio.wait_for(driver.wait(handle), 10)
    assert status.exit_code == 0
    assert status.signal is None
    text = log_path(s.machine_dir).read_text()
    assert f"hello {s.machine_dir / 'root'} True" in text
    assert handle.pid is not None
    assert os.getsid(0) != handle.pid


async def test_exit_codes_and_signals_are_reported(tmp_path: Path,
                                                  driver: ProcessDriver) -> None:
    three = await driver.start(spec(tmp_path, "raise SystemExit(3)"))
    assert (await asyncio.wait_for(driver.wait(three), 10)).exit_code == 3
    sleeper = await driver.start(spec(tmp_path, "import time; time.sleep(60)"))
    await driver.stop(sleeper, signal.SIGTERM, timeout=10)
    status = await driver.wait(sleeper)
    assert (status.exit_code, status.signal) == (143, 15)


@root_only
async def test_a_run_whose_namespace_is_gone_reports_its_failure_not_a_kill(
        tmp_path: Path, driver: ProcessDriver) -> None:
    # nsenter finds no namespace and exits 1 before the wrapper opens its exit file: no
    # signal was sent to anything, and the machine's exit must not say one was.
    run = await driver.start(spec(tmp_path, "pass", netns=f"bdgt-gone-{uuid.uuid4().hex[:6]}"))
    status = await asyncio.wait_for(driver.wait(run), 10)
    assert (status.exit_code, status.signal) == (1, None)


async def test_a_stop_sent_the_instant_a_run_starts_reaches_its_program(
        tmp_path: Path, driver: ProcessDriver) -> None:
    # The wrapper traps the group's signals before it forks the program; a signal
    # in between is held back until the program runs, never swallowed. Sent at
    # once after each start, about one run in fifty used to land there.
    for _ in range(100):
        sleeper = await driver.start(spec(tmp_path, "import time; time.sleep(60)"))
        await driver.stop(sleeper, signal.SIGTERM, timeout=5)
        status = await driver.wait(sleeper)
        assert (status.exit_code, status.signal) == (143, 15)


async def test_stop_escalates_to_sigkill(tmp_path: Path, driver: ProcessDriver) -> None:
    code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)")
    s = spec(tmp_path, code)
    handle = await driver.start(s)
    await until(lambda: "ready" in log_path(s.machine_dir).read_text())
    await driver.stop(handle, signal.SIGTERM, timeout=0.3)
    status = await driver.wait(handle)
    assert status.signal == signal.SIGKILL
    assert not await driver.inspect(handle)


async def test_a_missing_program_is_a_clear_error(tmp_path: Path, driver: ProcessDriver) -> None:
    s = spec(tmp_path, "")
    bad = TaskSpec(**{**s.__dict__, "argv": ["no-such-program-xyz"]})
    with pytest.raises(DriverError, match="not found"):
        await driver.start(bad)


async def test_a_spec_its_prepare_readied_is_started_without_preparing_again(
        tmp_path: Path, driver: ProcessDriver) -> None:
    """``prepared``: the create's prepare readied it a moment ago, and the start does not
    ready it again (here the program went missing in between: its exec fails, as a start
    would at that instant, where the start's own check would have said so first)."""
    bad = replace(spec(tmp_path, ""), argv=["no-such-program-xyz"])
    with pytest.raises(DriverError, match="not found"):
        await driver.start(bad)  # its prepare made the directories, then refused
    handle = await driver.start(replace(bad, start_seq=2, prepared=True))
    status = await asyncio.wait_for(driver.wait(handle), 10)
    assert status.exit_code == 127
    assert "no-such-program-xyz: not found" in log_path(bad.machine_dir).read_text()


async def test_start_is_idempotent_for_one_run(tmp_path: Path, driver: ProcessDriver) -> None:
    s = spec(tmp_path, "import time; time.sleep(60)")
    first = await driver.start(s)
    again = await driver.start(s)
    assert again.pid == first.pid
    fresh = ProcessDriver(driver.cgroups)  # a restarted worker
    third = await fresh.start(s)
    assert third.pid == first.pid
    await driver.stop(first, signal.SIGKILL, 1)


async def test_a_restarted_worker_finds_a_wrapper_spawned_an_instant_before(
    tmp_path: Path, driver: ProcessDriver
) -> None:
    """The other driver looks at once, while the wrapper's exec may still be finishing (its
    command line then reads empty for a moment): it adopts that wrapper, never a second."""
    for seq in range(1, 31):
        s = spec(tmp_path, "import time; time.sleep(60)", seq=seq)
        first = await driver.start(s)
        found = await ProcessDriver(driver.cgroups).start(s)
        assert found.pid == first.pid, f"start {seq}: a second wrapper was spawned"
        await driver.stop(first, signal.SIGKILL, 1)


async def test_a_start_cut_off_before_the_wrapper_wrote_its_pid_is_found(
    tmp_path: Path, driver: ProcessDriver
) -> None:
    """A worker killed between the fork and the pidfile: the next start adopts, never forks."""
    s = spec(tmp_path, "import time; time.sleep(60)")
    await driver.prepare(s)
    files = RunFiles.for_run(s.machine_dir, s.instance_id, s.start_seq)
    files.spawnfile.touch()
    # Stands in for a wrapper that is running but has not written its pid yet.
    wrapper = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(60)", str(files.pidfile))
    try:
        handle = await ProcessDriver(driver.cgroups).start(s)
        assert handle.pid == wrapper.pid
        assert not files.pidfile.exists(), "it must not have started a wrapper of its own"
    finally:
        wrapper.kill()
        await wrapper.wait()


async def test_a_run_that_already_ended_is_not_started_again(
    tmp_path: Path, driver: ProcessDriver
) -> None:
    s = spec(tmp_path, "raise SystemExit(5)")
    first = await driver.start(s)
    assert (await asyncio.wait_for(driver.wait(first), 10)).exit_code == 5
    log_before = log_path(s.machine_dir).read_bytes()
    restarted = ProcessDriver(driver.cgroups)
    again = await restarted.start(s)  # a restarted worker repeats the step
    status = await asyncio.wait_for(restarted.wait(again), 10)
    assert status.exit_code == 5
    assert log_path(s.machine_dir).read_bytes() == log_before


async def test_a_start_that_never_forked_runs_now(tmp_path: Path, driver: ProcessDriver) -> None:
    s = spec(tmp_path, "print('ran', flush=True)")
    await driver.prepare(s)
    RunFiles.for_run(s.machine_dir, s.instance_id, s.start_seq).spawnfile.touch()
    restarted = ProcessDriver(driver.cgroups)
    handle = await restarted.start(s)
    assert (await asyncio.wait_for(restarted.wait(handle), 10)).exit_code == 0
    assert "ran" in log_path(s.machine_dir).read_text()


async def test_a_new_driver_readopts_and_reads_the_real_exit_code(
    tmp_path: Path, driver: ProcessDriver
) -> None:
    go = tmp_path / "go"  # the program runs until told, so a busy host cannot end it early
    s = spec(tmp_path, "import sys; sys.stdin = None; input_=open('/dev/stdin'); "
                       f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)"
                       "\nraise SystemExit(7)")
    handle = await driver.start(s)
    stored = TaskHandle.from_json(handle.to_json())
    restarted = ProcessDriver(driver.cgroups)
    assert await restarted.recover(stored) is True
    go.touch()
    status = await asyncio.wait_for(restarted.wait(stored), 10)
    assert status.exit_code == 7
    await driver.wait(handle)  # reap it in the driver that spawned it


async def test_a_reused_pid_is_not_adopted(tmp_path: Path, driver: ProcessDriver) -> None:
    s = spec(tmp_path, "pass")
    handle = await driver.start(s)
    await driver.wait(handle)
    stranger = await asyncio.create_subprocess_exec(sys.executable, "-c",
                                                    "import time; time.sleep(30)")
    try:
        fake = TaskHandle(driver="process", machine_id=s.machine_id, instance_id=s.instance_id,
                          start_seq=s.start_seq, pid=stranger.pid,
                          data=handle.data.copy())
        assert await ProcessDriver(None).recover(fake) is False
        assert stranger.returncode is None
    finally:
        stranger.kill()
        await stranger.wait()


@root_only
async def test_memory_limit_oom_kills_and_says_so(tmp_path: Path, driver: ProcessDriver) -> None:
    assert driver.cgroups is not None
    code = "x = []\nwhile True: x.append(bytearray(16 << 20))"
    handle = await driver.start(spec(tmp_path, code, memory_mb=128))
    status = await asyncio.wait_for(driver.wait(handle), 30)
    assert status.oom_killed is True
    assert status.signal == signal.SIGKILL


@root_only
async def test_runs_as_the_unprivileged_user(tmp_path: Path, driver: ProcessDriver) -> None:
    s = spec(tmp_path, "import os, time; print('uid', os.getuid(), flush=True); time.sleep(60)",
             user=(65534, 65534))
    await driver.prepare(s)
    handle = await driver.start(s)
    await until(lambda: "uid 65534" in log_path(s.machine_dir).read_text())
    result = await driver.control.exec(handle, s, ["id", "-u"], 5, None)
    assert result.stdout.strip() == "65534"
    await driver.stop(handle, signal.SIGKILL, 5)
    with pytest.raises(TaskGone):
        await driver.control.exec(handle, s, ["id", "-u"], 5, None)


@root_only
async def test_a_machine_of_its_own_user_works_in_its_own_directory_by_path(
        tmp_path: Path, driver: ProcessDriver) -> None:
    """The data dir above a machine's directory is private (pytest's tmp_path is 0700 too), so
    a program that resolves its working directory, as `python3 -m http.server` does, must find
    a path it can use: its own directory, bound where every part of the path is open."""
    code = ("import os, time; here = os.getcwd(); "
            "open(os.path.join(here, 'note'), 'w').write('mine'); "
            "print('read', open(os.path.join(here, 'note')).read(), 'in', here, flush=True); "
            "time.sleep(60)")
    s = spec(tmp_path, code, user=(65534, 65534))
    handle = await driver.start(s)
    await until(lambda: "\n" in log_path(s.machine_dir).read_text())
    assert f"read mine in {HOME_MOUNT}" in log_path(s.machine_dir).read_text()
    assert (s.machine_dir / "root" / "note").read_text() == "mine"
    assert not any(HOME_MOUNT.iterdir()), "the host's own view of the mount point stays empty"
    result = await driver.control.exec(handle, s, ["cat", "note"], 5, None)
    assert (result.exit_code, result.stdout) == (0, "mine"), result.stderr
    await driver.stop(handle, signal.SIGKILL, 5)


@root_only
async def test_a_volume_is_handed_to_the_machines_user_and_a_link_in_it_is_not_followed(
        tmp_path: Path, driver: ProcessDriver) -> None:
    """The volume (root's: fresh) becomes the machine's user's, all of it, before its program
    runs; a link in it to a file outside is changed itself, and the file stays root's."""
    volume, outside = tmp_path / "volume", tmp_path / "outside"
    (volume / "deep").mkdir(parents=True)
    (volume / "deep" / "old").write_text("kept")
    outside.write_text("root's")
    (volume / "link").symlink_to(outside)
    guest = Path(f"/tmp/bodega-volume-{uuid.uuid4().hex[:8]}")  # a path its user can reach
    code = (f"open('{guest}/deep/new', 'w').write('mine'); "
            f"print(open('{guest}/deep/old').read(), flush=True)")
    s = replace(spec(tmp_path, code, user=(65534, 65534)),
                mounts=(Mount(volume, str(guest)),))
    try:
        handle = await driver.start(s)
        status = await asyncio.wait_for(driver.wait(handle), 10)
    finally:
        guest.rmdir()  # made by the wrapper on the host, bound only in the machine's namespace
    assert status.exit_code == 0, log_path(s.machine_dir).read_text()
    assert (volume / "deep" / "new").read_text() == "mine"
    for path in (volume, volume / "deep", volume / "deep" / "old", volume / "deep" / "new"):
        assert (path.stat().st_uid, path.stat().st_gid) == (65534, 65534), path
    assert (volume / "link").lstat().st_uid == 65534
    assert outside.stat().st_uid == 0


@root_only
async def test_only_an_execs_command_is_given_the_machines_environment(
        tmp_path: Path, driver: ProcessDriver) -> None:
    """The steps that enter the machine run as root: a machine's LD_PRELOAD reaching them
    would load its library into root. The dynamic loader says so for every program it
    loads with a library it cannot find: the command's own complaint is the only one."""
    base = spec(tmp_path, "import time; print('up', flush=True); time.sleep(60)",
                user=(65534, 65534))
    s = replace(base, env={**base.env, "LD_PRELOAD": "/nonexistent/bodega-preload.so"})
    handle = await driver.start(s)
    await until(lambda: "up" in log_path(s.machine_dir).read_text())
    result = await driver.control.exec(handle, s, ["printenv", "LD_PRELOAD"], 5, None)
    assert result.stdout == "/nonexistent/bodega-preload.so\n"
    assert result.stderr.count("bodega-preload.so") == 1, result.stderr
    await driver.stop(handle, signal.SIGKILL, 5)


@root_only
async def test_an_exec_the_instant_a_run_starts_is_where_its_program_runs(
        tmp_path: Path, driver: ProcessDriver) -> None:
    """Just spawned, the wrapper is not yet in the machine's mount namespace (``unshare`` is
    still making it): an exec waits until its program runs, and enters where it runs."""
    for seq in range(1, 11):
        s = spec(tmp_path, "import time; time.sleep(60)", seq=seq, user=(65534, 65534))
        handle = await driver.start(s)
        result = await driver.control.exec(handle, s, ["readlink", "/proc/self/ns/mnt"], 5,
                                           None)
        assert handle.pid is not None
        assert result.stdout.strip() == os.readlink(f"/proc/{handle.pid}/ns/mnt"), seq
        assert result.stdout.strip() != os.readlink("/proc/self/ns/mnt")
        await driver.stop(handle, signal.SIGKILL, 5)


@root_only
async def test_an_exec_never_enters_a_stranger_that_took_the_runs_pid(
        tmp_path: Path, driver: ProcessDriver) -> None:
    s = spec(tmp_path, "pass")
    handle = await driver.start(s)
    await driver.wait(handle)
    stranger = await asyncio.create_subprocess_exec(sys.executable, "-c",
                                                    "import time; time.sleep(30)")
    try:
        taken = TaskHandle(driver="process", machine_id=s.machine_id, instance_id=s.instance_id,
                           start_seq=s.start_seq, pid=stranger.pid, data=handle.data.copy())
        with pytest.raises(TaskGone):
            await ProcessDriver(driver.cgroups).control.exec(taken, s, ["true"], 5, None)
    finally:
        stranger.kill()
        await stranger.wait()


@root_only
async def test_ps_exec_and_destroy_leave_nothing(tmp_path: Path, driver: ProcessDriver) -> None:
    code = ("import socket, subprocess, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); "
            "s.listen(); subprocess.Popen(['sleep', '60']); print('up', flush=True); "
            "time.sleep(60)")
    s = spec(tmp_path, code)
    handle = await driver.start(s)
    await until(lambda: "up" in log_path(s.machine_dir).read_text())
    processes = await driver.control.ps(handle)
    commands = " ".join(p.command for p in processes)
    assert "sleep 60" in commands
    assert any(p.listen_sockets for p in processes)
    result = await driver.control.exec(handle, s, ["sh", "-c", "echo out; echo err >&2; exit 4"],
                                       5, None)
    assert (result.exit_code, result.stdout, result.stderr) == (4, "out\n", "err\n")
    slow = await driver.control.exec(handle, s, ["sleep", "30"], 0.2, None)
    assert slow.exit_code == 124
    pids = [p.pid for p in processes]
    await driver.destroy(s.machine_id, s.machine_dir)
    assert not s.machine_dir.exists()
    # Orphans are reaped by the host's init, which may take a moment.
    await until(lambda: all(not Path(f"/proc/{pid}").exists() for pid in pids))
    assert driver.cgroups is not None
    assert all(not d.exists() for d in driver.cgroups.dirs(s.machine_id))


@root_only
async def test_two_machines_bind_the_same_port_in_their_own_namespaces(
    tmp_path: Path, driver: ProcessDriver
) -> None:
    network = NetnsNetwork(ipaddress.ip_network("10.251.7.0/24"), HostNames(cluster_id.new()))
    await network.setup()
    ids = [uuid.uuid4().hex[:14] for _ in range(2)]
    try:
        server = ("import socket; s = socket.socket(); s.bind(('0.0.0.0', 8080)); s.listen(); "
                  "c, _ = s.accept(); c.sendall(open('/etc/hostname').read().encode()[:0] + "
                  "b'machine ' + __import__('os').environ['MID'].encode()); c.close()")
        handles = []
        for index, mid in enumerate(ids, start=2):
            attachment = await network.attach(mid, index)
            again = await network.attach(mid, index)  # idempotent
            assert again == attachment
            base = spec(tmp_path, server, machine_id=mid, netns=attachment.netns)
            s = TaskSpec(**{**base.__dict__, "env": {**base.env, "MID": mid}})
            handles.append((await driver.start(s), attachment.private_ip, mid))
        for handle, ip, mid in handles:
            data = b""
            for _ in range(250):
                try:
                    with socket.create_connection((ip, 8080), timeout=2) as conn:
                        data = conn.recv(100)
                        break
                except OSError:
                    await asyncio.sleep(0.02)
            assert data == f"machine {mid}".encode()
            await driver.wait(handle)
    finally:
        for index, mid in enumerate(ids, start=2):
            await network.detach(mid, index)
            await driver.destroy(mid, tmp_path / mid)
        await network.teardown()
    assert f" {network.bridge}:" not in await run("ip", "-o", "link")
    assert not [i for i in (2, 3) if Path(f"/run/netns/{network.netns(i)}").exists()]


@root_only
async def test_removing_a_cgroup_still_in_use_says_busy_instead_of_failing(
    tmp_path: Path, driver: ProcessDriver
) -> None:
    """On a loaded host a destroy can find its cgroup not yet freed: a retry, not a crash."""
    cgroups = driver.cgroups
    assert cgroups is not None
    s = spec(tmp_path, "import time; print('up', flush=True); time.sleep(60)")
    await driver.start(s)
    await until(lambda: "up" in log_path(s.machine_dir).read_text())
    assert cgroups.remove(s.machine_id) is False  # a live process holds it
    assert all(d.exists() for d in cgroups.dirs(s.machine_id))
    await driver.destroy(s.machine_id, s.machine_dir)
    assert all(not d.exists() for d in cgroups.dirs(s.machine_id))
