"""What a start runs as root runs nothing of the machine's: not its environment, not its
volume's files; and its program runs as its user alone, with no capabilities.

Real starts as root: the process driver's wrapper, and a worker for the events a
failed start leaves.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bodega.worker.drivers.base import DriverError, Mount, TaskSpec
from bodega.worker.drivers.process import ProcessDriver
from bodega.worker.drivers.process.launch import USER_SWITCH
from bodega.worker.drivers.process.logfiles import log_path
from bodega.worker.drivers.process.procfs import child_pids
from tests.poll_kit import until
from tests.python_kit import machine_python

from .crash_kit import crash_worker
from .preload_kit import marking_library

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines of their own need root")

USER = (65534, 65534)
# Says its effective uid and name in the marker, as builtins of the volume's shell, and fails.
FAKE = """#!/usr/bin/sh
while read -r key real effective _; do
  [ "$key" = Uid: ] && echo "$effective $0" >> {marker}
done < /proc/self/status
exit 1
"""


def spec(tmp: Path, argv: list[str], **changes: object) -> TaskSpec:
    mid = uuid.uuid4().hex[:14]
    base = TaskSpec(
        machine_id=mid, instance_id="01PRIVILEGES00000000000000", start_seq=1, app="app",
        image="img", argv=argv, env={"PATH": "/usr/bin:/bin"}, cpus=1, cpu_kind="shared",
        memory_mb=256, machine_dir=tmp / mid, netns=None, user=USER)
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user may enter (pytest's tmp_path is closed to the machine's)."""
    where = Path(tempfile.mkdtemp(prefix="bodega-start-"))
    where.chmod(0o755)
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


async def test_a_machines_ld_preload_is_loaded_by_its_program_alone(tmp_path: Path) -> None:
    """The config's environment is chosen by whoever holds an app token: its LD_PRELOAD is
    loaded by the machine's program only, as the machine's user, never by a root step of
    the start (the wrapper's shell, the mkdir and mounts of its volume and its directory,
    the unshare that takes the user)."""
    volume = tmp_path / "volume"
    volume.mkdir()
    guest = Path(f"/tmp/bodega-volume-{uuid.uuid4().hex[:8]}")
    driver = ProcessDriver(None)
    with marking_library() as library:
        s = spec(tmp_path, [machine_python(), "-c", "print('ran', flush=True)"],
                 env={"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(library.path)},
                 mounts=(Mount(volume, str(guest)),))
        try:
            handle = await driver.start(s)
            status = await asyncio.wait_for(driver.wait(handle), 20)
        finally:
            guest.rmdir()  # made on the host as the mount point
        assert (status.exit_code, "ran") == (0, log_path(s.machine_dir).read_text().strip())
        assert library.loaded_by() == [(USER[0], os.path.realpath(machine_python()))]


async def test_nothing_of_a_volume_bound_over_the_hosts_commands_runs_as_root(
        tmp_path: Path, open_dir: Path) -> None:
    """A volume may be bound anywhere in its machine's namespace, over /usr/bin too: once it
    is, nothing is exec'd as root there. Its own `mount`, `mkdir`, `nsenter`, ... would each
    write who ran them; only the machine's program runs, from the volume, as its user."""
    if os.path.realpath("/bin/sh") == "/bin/sh" or not Path("/usr/bin/python3").exists():
        pytest.skip("wants a merged /usr (/bin in /usr/bin) with /usr/bin/python3")
    marker = open_dir / "ran"
    marker.touch()
    marker.chmod(0o666)
    volume = tmp_path / "volume"
    volume.mkdir()
    shutil.copy2(os.path.realpath("/usr/bin/python3"), volume / "python3")
    shutil.copy2(os.path.realpath("/bin/sh"), volume / "sh")
    for name in ("mount", "umount", "mkdir", "setpriv", "unshare", "nsenter", "env", "cat"):
        (volume / name).write_text(FAKE.format(marker=marker))
        (volume / name).chmod(0o755)
    driver = ProcessDriver(None)
    s = spec(tmp_path, ["/usr/bin/python3", "-c", "import os; print('ran as', os.geteuid())"],
             mounts=(Mount(volume, "/usr/bin"),))
    handle = await driver.start(s)
    status = await asyncio.wait_for(driver.wait(handle), 20)
    assert marker.read_text() == ""
    assert (status.exit_code, log_path(s.machine_dir).read_text()) == (0, f"ran as {USER[0]}\n")


async def test_a_program_its_user_cannot_reach_is_refused_with_the_reason(
        tmp_path: Path) -> None:
    """root may exec a file in a directory closed to others (/root's, 0700); the machine's
    user may not. The start says so, where it would have run it with root's capabilities."""
    closed = Path(tempfile.mkdtemp(prefix="bodega-closed-"))  # 0700, root's
    try:
        program = Path(shutil.copy2("/bin/true", closed / "true"))
        driver = ProcessDriver(None)
        with pytest.raises(DriverError, match=(
                f"exec: {program}: not executable by the machine's user \\(uid {USER[0]}\\)")):
            await driver.start(spec(tmp_path, [str(program)]))
        # By PATH too: the user's exec would go on to a file it may run; here there is none.
        with pytest.raises(DriverError, match="exec: true: not executable by the machine's"):
            await driver.start(spec(tmp_path, ["true"], env={"PATH": str(closed)}))
        # The worker's own user (no user of its own) runs it as before.
        mine = await driver.start(spec(tmp_path, [str(program)], user=None))
        assert (await asyncio.wait_for(driver.wait(mine), 20)).exit_code == 0
    finally:
        shutil.rmtree(closed)


async def test_a_program_its_user_cannot_reach_is_not_run_by_the_wrapper_either(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the check (a directory closed between the check and the exec), the program's
    step, running as the machine's user with no capabilities, cannot exec it."""
    monkeypatch.setattr("bodega.worker.drivers.process.driver.check_program", lambda _: None,
                        raising=False)  # the check a start makes first, skipped
    closed = Path(tempfile.mkdtemp(prefix="bodega-closed-"))
    try:
        program = Path(shutil.copy2("/bin/true", closed / "true"))
        driver = ProcessDriver(None)
        s = spec(tmp_path, [str(program)])
        status = await asyncio.wait_for(driver.wait(await driver.start(s)), 20)
    finally:
        shutil.rmtree(closed)
    assert status.exit_code == 126
    assert "Permission denied" in log_path(s.machine_dir).read_text()


async def test_the_program_runs_as_its_user_alone_with_no_capabilities(tmp_path: Path) -> None:
    """As any program a user execs: the machine's uid and gid (real, effective, saved),
    none of the worker's supplementary groups, nothing permitted, effective, inheritable or
    ambient, and the bounding set it was given (the worker's)."""
    marker = f"bodega-caps-{uuid.uuid4().hex[:8]}"
    driver = ProcessDriver(None)
    user = (USER[0], USER[1] - 1)  # a gid apart from the uid: neither taken for the other
    s = spec(tmp_path, [machine_python(), "-c", "import time; time.sleep(60)", marker],
             user=user)
    own_groups = os.getgroups()
    os.setgroups([4, 24])  # a worker in groups of its own (adm, cdrom): none reach a machine
    try:
        handle = await driver.start(s)
    finally:
        os.setgroups(own_groups)
    assert handle.pid is not None
    wrapper = handle.pid

    def program() -> int | None:
        """The program once exec'd: the root steps before it (unshare) carry the same argv
        after their own, so the marker alone would find them first."""
        for pid in child_pids(wrapper):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
                uid = next(line.split()[1] for line in Path(f"/proc/{pid}/status")
                           .read_text().splitlines() if line.startswith("Uid:"))
            except OSError:
                continue
            if argv[0] == machine_python() and marker in argv and int(uid) == USER[0]:
                return pid
        return None

    await until(lambda: program() is not None)
    pid = program()
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        ids = [line.split(":")[1].split() for line in status
               if line.split(":")[0] in ("Uid", "Gid", "Groups")]
        assert ids == [[str(user[0])] * 4, [str(user[1])] * 4, []]
        caps = dict(line.split(":\t") for line in status if line.startswith("Cap"))
        own = dict(line.split(":\t") for line in Path("/proc/self/status").read_text()
                   .splitlines() if line.startswith("CapBnd"))
        assert caps == {"CapInh": "0000000000000000", "CapPrm": "0000000000000000",
                        "CapEff": "0000000000000000", "CapBnd": own["CapBnd"],
                        "CapAmb": "0000000000000000"}
    finally:
        await driver.stop(handle, signal.SIGKILL, 5)


async def test_the_refusal_is_the_machines_failed_start(tmp_path: Path) -> None:
    """What `bodega deploy` and `machine status` say: the launch's failure, with the reason."""
    closed = Path(tempfile.mkdtemp(prefix="bodega-closed-"))
    try:
        program = Path(shutil.copy2("/bin/true", closed / "true"))
        async with crash_worker(tmp_path) as worker:
            client = await worker.start()
            machine = await client.create_machine({"app": "a", "config": {
                "image": "local/closed", "init": {"exec": [str(program)]},
                "guest": {"cpus": 1, "memory_mb": 256}}})

            failed: list[dict[str, object]] = []
            for _ in range(600):
                events = await client.call("GET", machine.id, "events")
                failed = [e for e in events if e.get("status") == "failed"]
                if failed:
                    break
                await asyncio.sleep(0.05)
            assert failed, "the start did not fail"
            error = str(failed[0]["request"])
            assert f"exec: {program}: not executable by the machine's user" in error, failed
    finally:
        shutil.rmtree(closed)


def test_the_user_switch_stops_where_it_cannot_drop_the_workers_groups() -> None:
    """The wrapper's switch to the machine's user, as it runs it: it takes the user and drops
    every other group, and in a user namespace that denies ``setgroups`` it stops instead of
    running the program with the worker's groups (``nsenter`` went on there)."""
    switch = f'user={USER[0]}:{USER[1]}; {USER_SWITCH} cat /proc/self/status'
    # Run with groups of its own (adm, cdrom), as a worker may be: none reach the program.
    status = subprocess.run(["sh", "-c", switch], env={"PATH": os.defpath}, extra_groups=[4, 24],
                            capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(":", 1) for line in status.splitlines())
    assert fields["Uid"].split() == [str(USER[0])] * 4
    assert fields["Gid"].split() == [str(USER[1])] * 4
    assert fields["Groups"].strip() == ""
    assert int(fields["CapEff"], 16) == 0
    denied = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--", "sh", "-c",
         f"grep -qx deny /proc/self/setgroups && user=0:0 && {USER_SWITCH} /bin/true"],
        env={"PATH": os.defpath}, capture_output=True, text=True)
    assert denied.returncode != 0
    assert "setgroups failed" in denied.stderr, denied.stderr
