"""Parked launchers: a machine started from one runs exactly as a plain start would.

Real namespaces, cgroups and processes: the launcher waits in a wired
namespace; the start hands it the run (cgroups renamed, a run script of
literals); the program gets byte-for-byte the argv and environment asked
for, in the machine's own cgroups and namespace, as the unprivileged user.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bodega.runtime import cluster_id
from bodega.worker.drivers.base import RESOLV_CONF, Mount, TaskSpec
from bodega.worker.drivers.process import ProcessDriver
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.launch import HOME_MOUNT, MACHINE_DIRS, RunFiles
from bodega.worker.drivers.process.parking import (
    PARK_NAME,
    SPARE_HOME,
    Parking,
    park_slot,
    run_script,
)
from bodega.worker.drivers.process.procfs import pids_with_argument
from bodega.worker.host.core.names import HostNames
from bodega.worker.host.netns import NetnsNetwork
from tests.cidr_kit import held_octet
from tests.poll_kit import until
from tests.python_kit import machine_python

from .preload_kit import marking_library

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (netns, cgroups)")

# Tricky on purpose: quotes, $, backticks, globs, newlines, spaces, non-ASCII.
NASTY = ["it's", '"quoted"', "$HOME `id` $(id)", "*", "two\nlines", " spaced ", "ünï"]
# The whole environment but PWD, which the wrapper's shell sets on any start, and
# LC_CTYPE, which Python sets for itself in the C locale (PEP 538).
REPORT = ("import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'env': "
          "{k: v for k, v in os.environ.items() if k not in ('PWD', 'LC_CTYPE')}, "
          "'uid': os.getuid(), "
          "'cwd': os.getcwd()}), flush=True); "
          "import time; time.sleep(60)")


def parking(driver: ProcessDriver) -> Parking:
    """The driver's launcher parking: it has some wherever it has cgroups and a park dir."""
    assert driver.parking is not None
    return driver.parking


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[tuple[ProcessDriver, NetnsNetwork, Cgroups]]:
    subnet = f"10.{held_octet('parking', 232, 248)}.{200 + os.getpid() % 50}.0/24"
    network = NetnsNetwork(ipaddress.ip_network(subnet), HostNames(cluster_id.new()))
    await network.setup()
    cgroups = Cgroups.detect(f"park-test-{uuid.uuid4().hex[:6]}")
    assert cgroups is not None
    # Machines run as their own users (the specs below): launchers make spare homes.
    driver = ProcessDriver(cgroups, park_dir=tmp_path / "park", spare_homes=True)
    try:
        yield driver, network, cgroups
    finally:
        parking(driver).close()
        await network.teardown()
        for scope in (cgroups.root / "memory" / "bodega" / cgroups.scope,
                      cgroups.root / "cpu" / "bodega" / cgroups.scope):
            for child in [c for c in scope.iterdir() if c.is_dir()] if scope.exists() else []:
                cgroups.kill_all(child.name)
                await until(lambda c=child: not cgroups.pids(c.name))
                child.rmdir()
            if scope.exists():
                scope.rmdir()



ENV = {"PATH": "/usr/bin:/bin", "TRICKY": "a'b\"c $d"}


def spec(tmp: Path, netns: str, mid: str, env: dict[str, str] = ENV) -> TaskSpec:
    return TaskSpec(machine_id=mid, instance_id="01PARKTEST0000000000000000", start_seq=1,
                    app="app", image="img", argv=[machine_python(), "-c", REPORT, *NASTY],
                    env=env, cpus=1,
                    cpu_kind="shared", memory_mb=256, machine_dir=tmp / mid, netns=netns,
                    user=(65534, 65534))


async def test_a_start_from_a_parked_launcher_is_a_plain_start(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups]
) -> None:
    driver, network, cgroups = rig
    netns, launcher = await _parked(driver, network, 5, tmp_path / "park")
    await until(lambda: parking(driver).waiting(netns))  # in its cgroups: creates prefer it
    assert not parking(driver).waiting(network.netns(6))  # none parked there

    mid = uuid.uuid4().hex[:14]
    s = spec(tmp_path, netns, mid)
    assert parking(driver).holds(netns)
    handle = await driver.start(s)
    assert not parking(driver).waiting(netns)  # taken
    assert not parking(driver).holds(netns)  # the upkeep parks another once it is at rest
    assert handle.pid == launcher  # the launcher itself became the machine's wrapper
    report = await _report(s)
    # Its own directory, where it runs as its own user (see test_process_driver).
    # Exactly the environment asked for: nothing of the launcher's (its PATH, OLDPWD) left.
    assert report == {"argv": NASTY, "env": ENV, "uid": 65534, "cwd": str(HOME_MOUNT)}
    (program,) = [p for p in cgroups.pids(mid) if p != handle.pid]
    assert os.stat(f"/proc/{program}/ns/net").st_ino == os.stat(f"/run/netns/{netns}").st_ino
    # Its directory is bound at HOME_MOUNT in a mount namespace of its own, never the host's.
    assert os.stat(f"/proc/{program}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino
    assert f" {HOME_MOUNT} " not in Path("/proc/self/mountinfo").read_text()
    assert not any(d.exists() for d in cgroups.dirs(park_slot(netns)))  # renamed to mid's
    files = RunFiles.for_run(s.machine_dir, s.instance_id, s.start_seq)
    assert str(files.pidfile) in Path(f"/proc/{handle.pid}/cmdline").read_text()

    restarted = ProcessDriver(cgroups, park_dir=tmp_path / "park")  # a worker restart
    assert (await restarted.start(s)).pid == handle.pid  # found, never started twice
    await driver.destroy(mid, s.machine_dir)


async def test_the_run_reaches_a_parked_launcher_through_its_fifo_never_a_file(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups]
) -> None:
    """The run script holds the machine's environment (app secrets among it): it goes to
    the launcher through the FIFO, and no file holds it, not even for the moment before
    the launcher has read it (looked for as soon as the start returns)."""
    driver, network, _cgroups = rig
    netns, launcher = await _parked(driver, network, 8, tmp_path / "park")
    await until(lambda: parking(driver).waiting(netns))
    mid = uuid.uuid4().hex[:14]
    s = spec(tmp_path, netns, mid)
    handle = await driver.start(s)
    files = RunFiles.for_run(s.machine_dir, s.instance_id, s.start_seq)
    assert not files.pidfile.with_suffix(".run").exists()
    written = [p for p in s.machine_dir.rglob("*")
               if p.is_file() and "a'b\"c $d" in p.read_text(errors="replace")]
    assert written == []
    assert handle.pid == launcher
    assert (await _report(s))["env"] == ENV
    await driver.destroy(mid, s.machine_dir)


@pytest.mark.parametrize("env", [{"my.setting": "on", "PATH": "/usr/bin:/bin"},
                                 {"HOME": "/x y"}, {}], ids=["not-a-shell-name", "home", "none"])
async def test_the_program_gets_exactly_its_environment_whatever_the_names(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups], env: dict[str, str]
) -> None:
    """A name the shell cannot export (``my.setting``) does not stop the start (the
    wrapper's shell passes on only names it can hold, as on a plain start); with no
    environment asked for, the program gets none (not the launcher's PATH)."""
    driver, network, _cgroups = rig
    netns, launcher = await _parked(driver, network, 9, tmp_path / "park")
    await until(lambda: parking(driver).waiting(netns))
    mid = uuid.uuid4().hex[:14]
    s = spec(tmp_path, netns, mid, env)
    if "PATH" not in env:  # the program by its full path, as a machine without PATH needs
        s = dataclasses.replace(s, argv=[machine_python(), *s.argv[1:]])
    assert (await driver.start(s)).pid == launcher
    held = {k: v for k, v in env.items() if k != "my.setting"}
    assert (await _report(s))["env"] == held
    await driver.destroy(mid, s.machine_dir)


async def test_a_parked_start_gives_the_machines_environment_to_its_program_alone(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups]
) -> None:
    """The launcher runs the run as root: the machine's LD_PRELOAD reaches none of it (not
    its shell, the wrapper's, the volume's mkdir and mount, unshare), only the program."""
    driver, network, _cgroups = rig
    netns, launcher = await _parked(driver, network, 12, tmp_path / "park")
    await until(lambda: parking(driver).waiting(netns))
    volume = tmp_path / "volume"
    volume.mkdir()
    guest = Path(f"/tmp/bodega-volume-{uuid.uuid4().hex[:8]}")
    with marking_library() as library:
        s = dataclasses.replace(
            spec(tmp_path, netns, uuid.uuid4().hex[:14],
                 {**ENV, "LD_PRELOAD": str(library.path)}),
            mounts=(Mount(volume, str(guest)),))
        try:
            assert (await driver.start(s)).pid == launcher
            await _report(s)
        finally:
            await driver.destroy(s.machine_id, s.machine_dir)
            guest.rmdir()  # made on the host as the mount point
        assert library.loaded_by() == [(65534, os.path.realpath(machine_python()))]


@pytest.mark.parametrize("remade", [False, True], ids=["as-parked", "remade-since"])
async def test_a_launcher_parked_for_a_machine_at_rest_binds_its_directory_ahead(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups], remade: bool
) -> None:
    """Parked for a machine at rest, the launcher binds the machine's directory while it
    waits, and the start does not bind it again; when the directory was made anew since
    (the bound one is gone), the launcher is discarded and the start is a plain one."""
    driver, network, _cgroups = rig
    mid = uuid.uuid4().hex[:14]
    s = spec(tmp_path, network.netns(10), mid)
    home = s.machine_dir / "root"
    home.mkdir(parents=True)
    (home / "note").write_text("parked")
    netns, launcher = await _parked(driver, network, 10, tmp_path / "park", home)
    await until(lambda: parking(driver).waiting(netns))
    if remade:
        (home / "note").unlink()
        home.rmdir()
        home.mkdir()
        (home / "note").write_text("remade")
    s = dataclasses.replace(s, argv=[machine_python(), "-c",
                                     "print(open('note').read(), flush=True); "
                                     "import time; time.sleep(60)"])
    handle = await driver.start(s)
    assert (handle.pid == launcher) != remade
    log = s.machine_dir / "logs" / "machine.log"
    await until(lambda: log.exists() and log.read_text().strip() != "")
    assert log.read_text().strip() == ("remade" if remade else "parked")
    wrapper_args = Path(f"/proc/{handle.pid}/cmdline").read_text().split("\0")
    assert (str(home) in wrapper_args) == remade  # bound by the start
    assert ("@" in wrapper_args) != remade  # bound by the launcher
    if remade:
        assert not Path(f"/proc/{launcher}").exists() or _zombie(launcher)
    assert f" {HOME_MOUNT} " not in Path("/proc/self/mountinfo").read_text()
    await driver.destroy(mid, s.machine_dir)


RESOLVER = ("import json; print(json.dumps({'argv': [], "
            "'resolv': open('/etc/resolv.conf').read(), 'mounts': [line for line in "
            "open('/proc/self/mountinfo') if ' /etc/resolv.conf ' in line]}), flush=True); "
            "import time; time.sleep(60)")


@pytest.mark.parametrize("written", [True, False], ids=["written", "not-yet-written"])
async def test_a_launcher_binds_the_private_networks_resolv_conf_ahead(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups], written: bool
) -> None:
    """Parked once the private network has written its resolv.conf, the launcher binds it
    read-only, and the start has nothing left to bind: no gate, no ``mount``. Parked before,
    the start binds the machine's own copy as a plain start does."""
    driver, network, _ = rig
    shared = tmp_path / "resolv.conf"
    if written:
        shared.write_text("nameserver fdaa::3\n# the host's\n")
        shared.chmod(0o644)
    parking(driver).resolv_conf = shared
    netns, launcher = await _parked(driver, network, 9, tmp_path / "park")
    own = tmp_path / "own-resolv.conf"  # the machine's copy of the same (effects.py)
    own.write_text("nameserver fdaa::3\n# the machine's\n")
    mid = uuid.uuid4().hex[:14]
    s = dataclasses.replace(spec(tmp_path, netns, mid), argv=[machine_python(), "-c", RESOLVER],
                            mounts=(Mount(own, RESOLV_CONF),))
    host_before = Path("/etc/resolv.conf").read_text()
    handle = await driver.start(s)
    assert handle.pid == launcher
    report = await _report(s)
    assert report["resolv"] == (shared if written else own).read_text()
    (bound,) = report["mounts"]
    assert (" ro," in bound) is written  # the host's file: no machine writes it
    files = RunFiles.for_run(s.machine_dir, s.instance_id, s.start_seq)
    assert files.gate.exists() is not written  # a gate only where the start binds
    assert Path("/etc/resolv.conf").read_text() == host_before
    await driver.destroy(mid, s.machine_dir)


async def test_a_launcher_parked_for_another_directory_is_parked_again(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups]
) -> None:
    """An address's launcher parked as a spare is replaced by one for the machine that came
    to rest there; parked again for the same, it stays; for the same path made anew, it is
    replaced; for a directory not made yet, it is parked as a spare again, and stays."""
    driver, network, _cgroups = rig
    park = tmp_path / "park"

    async def replaced(old: int) -> int:
        await until(lambda: not Path(f"/proc/{old}").exists() or _zombie(old))
        await until(lambda: parking(driver).waiting(netns))  # forks nothing more (_parked)
        (new,) = await _launchers(park / netns)
        assert new != old
        return new

    netns, spare = await _parked(driver, network, 11, park)
    home = tmp_path / "resting" / "root"
    home.mkdir(parents=True)
    assert parking(driver).holds(netns)
    assert not parking(driver).holds(netns, home)
    parking(driver).park(netns, home)
    launcher = await replaced(spare)
    assert parking(driver).holds(netns, home)
    assert not parking(driver).holds(netns)
    parking(driver).park(netns, home)
    assert await _launchers(park / netns) == [launcher]
    home.rmdir()
    home.mkdir()
    parking(driver).park(netns, home)
    launcher = await replaced(launcher)
    missing = tmp_path / "not-yet" / "root"
    parking(driver).park(netns, missing)
    launcher = await replaced(launcher)
    assert not parking(driver).holds(netns, missing)  # it bound none: the upkeep looks again
    parking(driver).park(netns, missing)
    assert await _launchers(park / netns) == [launcher]
    parking(driver).release(netns)
    assert not parking(driver).holds(netns)


NOTE_AND_WHERE = [machine_python(), "-c", "import os; print(open('note').read(), os.getcwd(), "
                  "flush=True); import time; time.sleep(60)"]


async def test_a_launcher_at_a_free_address_makes_the_next_machines_directory_ahead(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups]
) -> None:
    """A spare launcher binds a directory of its own while it waits; the create's prepare
    renames it into the new machine's directory, and the start binds nothing: the program
    starts in it, a file written there after the rename in sight. The upkeep parking at
    that address again meanwhile (its look began before the create) keeps the launcher."""
    driver, network, _cgroups = rig
    park = tmp_path / "park"
    netns, launcher = await _parked(driver, network, 13, park)
    spare = park / netns / SPARE_HOME
    assert sorted(p.name for p in spare.iterdir()) == sorted(MACHINE_DIRS)
    assert parking(driver).holds(netns)  # a spare is what a free address wants
    s = dataclasses.replace(spec(tmp_path, netns, uuid.uuid4().hex[:14]), argv=NOTE_AND_WHERE)
    await driver.prepare(s)
    assert not spare.exists()  # all of it the machine's now
    home = s.machine_dir / "root"
    assert os.stat(home).st_uid == 65534
    (home / "note").write_text("furnished")
    parking(driver).park(netns)  # a stale look of the upkeep's: nothing to replace
    assert parking(driver).holds(netns)
    handle = await driver.start(dataclasses.replace(s, prepared=True))
    assert handle.pid == launcher
    log = s.machine_dir / "logs" / "machine.log"
    await until(lambda: log.exists() and log.read_text().strip() != "")
    assert log.read_text().split() == ["furnished", str(HOME_MOUNT)]
    wrapper_args = Path(f"/proc/{handle.pid}/cmdline").read_text().split("\0")
    assert "@" in wrapper_args  # bound by the launcher: no `mount` at the start
    assert str(home) not in wrapper_args
    await driver.destroy(s.machine_id, s.machine_dir)


async def test_a_spare_no_create_took_is_bound_over_by_the_start_and_removed(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups]
) -> None:
    """A machine whose directory was made before (a prepare done again), or a launcher not
    yet ``ready`` (its spare not bound yet), takes no spare: the launcher still runs the
    start, whose wrapper binds the machine's own directory over the spare. A spare is made
    afresh by the next launcher parked there; one nobody took goes with its launcher, and
    with the next worker's reap."""
    driver, network, cgroups = rig
    park = tmp_path / "park"
    netns, launcher = await _parked(driver, network, 15, park)
    spare = park / netns / SPARE_HOME
    s = dataclasses.replace(spec(tmp_path, netns, uuid.uuid4().hex[:14]), argv=NOTE_AND_WHERE)
    (park / netns / "ready").unlink()  # as before the launcher has bound it
    assert not parking(driver).furnish(netns, s.machine_dir)
    (park / netns / "ready").touch()
    home = s.machine_dir / "root"
    home.mkdir(parents=True)
    (home / "note").write_text("made-before")
    assert not parking(driver).furnish(netns, s.machine_dir)
    handle = await driver.start(s)
    assert handle.pid == launcher
    log = s.machine_dir / "logs" / "machine.log"
    await until(lambda: log.exists() and log.read_text().strip() != "")
    assert log.read_text().split() == ["made-before", str(HOME_MOUNT)]
    assert str(home) in Path(f"/proc/{handle.pid}/cmdline").read_text().split("\0")
    await driver.destroy(s.machine_id, s.machine_dir)

    netns, launcher = await _parked(driver, network, 15, park)  # a spare made afresh
    assert sorted(p.name for p in spare.iterdir()) == sorted(MACHINE_DIRS)
    parking(driver).release(netns)  # the namespace goes
    assert not spare.exists()
    netns, launcher = await _parked(driver, network, 14, park)
    assert (park / netns / SPARE_HOME).exists()
    parking(ProcessDriver(cgroups, park_dir=park, spare_homes=True)).reap()  # a restart
    assert not (park / netns / SPARE_HOME).exists()
    await until(lambda: not Path(f"/proc/{launcher}").exists() or _zombie(launcher))


async def test_a_spare_a_start_took_stays_while_it_runs_whatever_parks_there_again(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups]
) -> None:
    """The upkeep may park at an address whose launcher a start has just taken (its look
    began before the start). The spare that start took unfurnished is about to have the
    machine's directory bound onto it by the start's wrapper, and a bind onto a removed
    directory fails (the wrapper exits 125: ``mount: /run/bodega/home: ... No such file or
    directory``): it stays, the same directory, while that run lives, and the launcher
    parked meanwhile makes no spare."""
    driver, network, _cgroups = rig
    park = tmp_path / "park"
    netns, launcher = await _parked(driver, network, 13, park)
    spare_root = park / netns / SPARE_HOME / MACHINE_DIRS[0]
    before = spare_root.stat().st_ino
    s = dataclasses.replace(spec(tmp_path, netns, uuid.uuid4().hex[:14]), argv=NOTE_AND_WHERE)
    home = s.machine_dir / "root"
    home.mkdir(parents=True)
    (home / "note").write_text("made-before")
    assert not parking(driver).furnish(netns, s.machine_dir)  # its directory was made before
    handle = await driver.start(s)
    assert handle.pid == launcher
    parking(driver).park(netns)  # the upkeep, from a look that began before the start
    assert spare_root.stat().st_ino == before
    log = s.machine_dir / "logs" / "machine.log"
    await until(lambda: log.exists() and log.read_text().strip() != "")
    assert log.read_text().split() == ["made-before", str(HOME_MOUNT)]
    await driver.destroy(s.machine_id, s.machine_dir)


async def test_without_machine_users_a_launcher_at_a_free_address_binds_nothing(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups]
) -> None:
    """No spare where machines do not run as their own users (``spare_homes`` off): the
    launcher binds nothing, and a start as the machine's user binds its directory."""
    _driver, network, cgroups = rig
    park = tmp_path / "park-plain"
    driver = ProcessDriver(cgroups, park_dir=park)
    try:
        netns, launcher = await _parked(driver, network, 16, park)
        assert not (park / netns / SPARE_HOME).exists()
        assert parking(driver).holds(netns)
        s = spec(tmp_path, netns, uuid.uuid4().hex[:14])
        handle = await driver.start(s)
        assert handle.pid == launcher
        assert (await _report(s))["cwd"] == str(HOME_MOUNT)
        assert str(s.machine_dir / "root") in Path(
            f"/proc/{handle.pid}/cmdline").read_text().split("\0")
        await driver.destroy(s.machine_id, s.machine_dir)
    finally:
        parking(driver).close()


def test_a_run_script_cut_short_runs_nothing(tmp_path: Path) -> None:
    """The worker killed while writing the run: whatever part the launcher read runs
    nothing (its first command would make the machine's log file)."""
    s = spec(tmp_path, "none", "cut")
    script = run_script(s, RunFiles.for_run(s.machine_dir, s.instance_id, 1), None, []).encode()
    log = s.machine_dir / "logs" / "machine.log"
    log.parent.mkdir(parents=True)
    for cut in range(1, len(script), max(1, len(script) // 60)):
        part = tmp_path / "part"
        part.write_bytes(script[:cut])
        subprocess.run(["/bin/sh", "-c", f". {part}"], capture_output=True, check=False)
        assert not log.exists(), f"cut at {cut} of {len(script)} ran: {script[:cut]!r}"


async def test_launchers_left_by_a_previous_worker_are_reaped(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups]
) -> None:
    driver, network, cgroups = rig
    await network.prewarm([6])
    parking(driver).park(network.netns(6))
    left = await _launchers(tmp_path / "park")
    assert len(left) == 1
    parking(ProcessDriver(cgroups, park_dir=tmp_path / "park")).reap()
    await until(lambda: not Path(f"/proc/{left[0]}").exists() or _zombie(left[0]))


async def test_a_launcher_in_a_rebuilt_namespace_is_never_used(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups]
) -> None:
    driver, network, _cgroups = rig
    netns, launcher = await _parked(driver, network, 7, tmp_path / "park")
    await network.detach("gone", 7)  # the address is freed and wired afresh
    await network.prewarm([7])
    mid = uuid.uuid4().hex[:14]
    handle = await driver.start(spec(tmp_path, netns, mid))
    assert handle.pid != launcher  # a plain start, in the namespace that exists now
    await driver.destroy(mid, tmp_path / mid)


async def test_a_launcher_that_died_is_discarded_without_a_signal_to_its_pid(
    tmp_path: Path, rig: tuple[ProcessDriver, NetnsNetwork, Cgroups],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once reaped, its pid is free for any new process of the host: a SIGKILL to that
    process group would kill a stranger (a host forks its pids round in minutes)."""
    driver, network, _cgroups = rig
    netns, launcher = await _parked(driver, network, 17, tmp_path / "park")
    os.kill(launcher, signal.SIGKILL)
    await until(lambda: not parking(driver).waiting(netns))  # it asks: the launcher is reaped
    signalled: list[int] = []
    monkeypatch.setattr(os, "killpg", lambda pid, _signal: signalled.append(pid))
    parking(driver).release(netns)
    assert launcher not in signalled


async def _report(s: TaskSpec) -> dict[str, Any]:
    """What REPORT printed in the machine's log, once it has."""
    log = s.machine_dir / "logs" / "machine.log"
    await until(lambda: log.exists() and "argv" in log.read_text())
    report: dict[str, Any] = json.loads(log.read_text().splitlines()[0])
    return report


async def _parked(driver: ProcessDriver, network: NetnsNetwork, index: int,
                  park: Path, home: Path | None = None) -> tuple[str, int]:
    """Wire address ``index``'s namespace and park a launcher there (for a machine at rest
    whose directory is ``home``): its namespace and pid, once it waits at its FIFO."""
    await network.prewarm([index])
    netns = network.netns(index)
    parking(driver).park(netns, home)
    # Once ready it forks nothing more (its `mount` child, before its exec, carries the
    # launcher's own command line).
    await until(lambda: parking(driver).waiting(netns))
    found = await _launchers(park / netns)
    assert len(found) == 1
    await until(lambda: _reading_fifo(found[0]))
    return netns, found[0]


async def _launchers(under: Path) -> list[int]:
    """The parked launchers whose directory is ``under`` (once they show up in /proc)."""
    def find() -> list[int]:
        found = []
        for pid in pids_with_argument(PARK_NAME):
            try:
                if str(under) in Path(f"/proc/{pid}/cmdline").read_text():
                    found.append(pid)
            except OSError:
                continue
        return found

    seen: list[int] = []

    def found() -> bool:
        # Kept from the look that saw them: a launcher's command line reads empty for an
        # instant while nsenter execs its shell, so a second look may miss it.
        seen[:] = find()
        return bool(seen)

    await until(found)
    return seen


def _reading_fifo(pid: int) -> bool:
    """The launcher sits opening its FIFO for reading, waiting for a writer."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() == "wait_for_partner"
    except OSError:
        return False


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
